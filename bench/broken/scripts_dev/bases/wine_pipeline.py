"""Quick experiment: wine cultivar classification with a scaled logistic-regression pipeline."""
import numpy as np
import pandas as pd
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

SEED = 0
TEST_SIZE = 0.3
C = 0.05
MAX_ITER = 2000
CV_FOLDS = 5
TOP_K = 5

np.random.seed(SEED)

wine = load_wine(as_frame=True)
df = wine.frame
print(f"{len(df)} samples, class counts {df['target'].value_counts().sort_index().tolist()}")

features = [c for c in df.columns if c != "target"]
train_df, test_df = train_test_split(df, test_size=TEST_SIZE, random_state=SEED, stratify=df["target"])

baseline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=MAX_ITER))
baseline.fit(train_df[["proline"]], train_df["target"])
base_acc = baseline.score(test_df[["proline"]], test_df["target"])
print(f"baseline (proline only) test accuracy {base_acc:.4f}")

model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=MAX_ITER))
cv = cross_val_score(model, train_df[features], train_df["target"], cv=CV_FOLDS)
print(f"cv accuracy {cv.mean():.4f} +/- {cv.std():.4f}")

model.fit(train_df[features], train_df["target"])
clf = model.named_steps["logisticregression"]
importance = pd.Series(np.abs(clf.coef_).mean(axis=0), index=features).sort_values(ascending=False)
print("top features:", ", ".join(importance.index[:TOP_K]))

test_acc = model.score(test_df[features], test_df["target"])
print(f"RESULT accuracy={test_acc:.4f}")
