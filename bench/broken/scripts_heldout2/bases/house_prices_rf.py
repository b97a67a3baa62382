"""Random-forest regression of synthetic house prices from a pandas table with categorical columns."""
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

rng = np.random.default_rng(0)
N = 1200
CITY_PREMIUM = {"north": 40.0, "south": 10.0, "east": 25.0, "west": 0.0}
HEATING_PREMIUM = {"gas": 8.0, "electric": 0.0, "heatpump": 15.0}

df = pd.DataFrame({
    "area": rng.uniform(40, 220, N).round(1),
    "rooms": rng.integers(1, 7, N),
    "age": rng.integers(0, 80, N),
    "city": rng.choice(list(CITY_PREMIUM), N),
    "heating": rng.choice(list(HEATING_PREMIUM), N),
})
df["price"] = (1.8 * df["area"] + 6.0 * df["rooms"] - 0.9 * df["age"]
               + df["city"].map(CITY_PREMIUM) + df["heating"].map(HEATING_PREMIUM)
               + rng.normal(0, 15, N))
df["area_per_room"] = df["area"] / df["rooms"]
df["is_new"] = (df["age"] < 10).astype(int)
print("mean price by city:", df.groupby("city")["price"].mean().round(1).to_dict())

features = df[["area", "rooms", "age", "area_per_room", "is_new", "city", "heating"]]
target = df["price"]
X_tr, X_te, y_tr, y_te = train_test_split(features, target, test_size=0.25, random_state=0)

numeric = ["area", "rooms", "age", "area_per_room", "is_new"]
categorical = ["city", "heating"]
pre = ColumnTransformer([
    ("num", StandardScaler(), numeric),
    ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
])
model = Pipeline([
    ("pre", pre),
    ("rf", RandomForestRegressor(n_estimators=150, max_depth=12, random_state=0, n_jobs=1)),
])
model.fit(X_tr, y_tr)
r2 = r2_score(y_te, model.predict(X_te))
print(f"RESULT r2={r2:.4f}")
