"""Diabetes progression regression: ridge on standardized + squared features, alpha by K-fold CV."""
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, train_test_split
from sklearn.preprocessing import StandardScaler

# ---- config ----
SEED = 3
TEST_SIZE = 0.2
N_FOLDS = 5
ALPHAS = np.logspace(-2, 3, 11)
ADD_SQUARES = True

np.random.seed(SEED)

X, y = load_diabetes(return_X_y=True)
X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, random_state=SEED)


def featurize(X):
    if ADD_SQUARES:
        X = np.hstack([X, X ** 2])
    return X


scaler = StandardScaler().fit(featurize(X_tr))
F_tr = scaler.transform(featurize(X_tr))
F_te = scaler.transform(featurize(X_te))
print(f"train={F_tr.shape} test={F_te.shape}")

kfold = KFold(n_splits=N_FOLDS, shuffle=True, random_state=SEED)
cv_scores = []
for alpha in ALPHAS:
    fold_r2 = []
    for tr_idx, va_idx in kfold.split(F_tr):
        model = Ridge(alpha=alpha)
        model.fit(F_tr[tr_idx], y_tr[tr_idx])
        fold_r2.append(r2_score(y_tr[va_idx], model.predict(F_tr[va_idx])))
    cv_scores.append(np.mean(fold_r2))
    print(f"alpha={alpha:9.3f} cv_r2={cv_scores[-1]:.4f}")

best_alpha = ALPHAS[int(np.argmax(cv_scores))]
final = Ridge(alpha=best_alpha).fit(F_tr, y_tr)
test_pred = final.predict(F_te)
rmse = float(np.sqrt(np.mean((test_pred - y_te) ** 2)))
top = np.argsort(-np.abs(final.coef_))[:3]
print(f"best_alpha={best_alpha:.3f} test_rmse={rmse:.2f} top_features={top.tolist()}")
print(f"RESULT test_r2={r2_score(y_te, test_pred):.4f}")
