"""Gradient boosting in a scikit-learn Pipeline on the bundled breast-cancer table (pandas),
tuned with a cross-validated grid search."""
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.feature_selection import SelectKBest, f_classif
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

SEED = 0
np.random.seed(SEED)

df = load_breast_cancer(as_frame=True).frame
# a few hand-made ratio features
df["area_growth"] = df["worst area"] / df["mean area"]
df["concavity_growth"] = df["worst concavity"] / (df["mean concavity"] + 1e-3)
df["texture_spread"] = df["worst texture"] - df["mean texture"]
print(df.shape, "class balance:", df["target"].value_counts().to_dict())

X = df.drop(columns="target")
y = df["target"]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=SEED)

pipe = Pipeline([
    ("scale", StandardScaler()),
    ("select", SelectKBest(f_classif)),
    ("gb", GradientBoostingClassifier(loss="log_loss", n_estimators=60, max_depth=2, random_state=SEED)),
])
grid = {"select__k": [10, 20], "gb__learning_rate": [0.05, 0.2]}
cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=SEED)
search = GridSearchCV(pipe, grid, cv=cv, scoring="roc_auc", n_jobs=1)
search.fit(X_train, y_train)
print("best params:", search.best_params_, f"cv_auc={search.best_score_:.4f}")

proba = search.predict_proba(X_test)[:, 1]
auc = roc_auc_score(y_test, proba)
print(f"RESULT roc_auc={auc:.4f}")
