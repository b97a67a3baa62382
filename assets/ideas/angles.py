"""Directions an idea can take, whatever the task: a refill asks for ideas along the ones that no
idea of the topic has taken yet. The small model, asked for more ideas after its first ones were
dropped as near-copies, proposes the same few again ("Feature Selection", "Regularization
Parameter Tuning" three times each in the diabetes runs, bench/records/effectiveness_diabetes_import.json);
naming the directions left untried spreads its proposals over the rest of what an experiment
can change. The list is generic ML practice, not any topic's answer; an angle counts as taken
when one of its words appears in an earlier idea's name, title or summary."""
from __future__ import annotations

from collections.abc import Sequence

# (the direction as the prompt names it, words whose presence in an idea means it took it)
ANGLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the loss or training objective (e.g. a robust or smoothed loss, a weighting of the examples)",
     ("loss", "objective", "huber", "robust", "smoothing", "weighting")),
    ("a transform of the target or of the inputs (e.g. a log or power transform, another scaling)",
     ("transform", "log", "power", "quantile", "normaliz", "normalis", "scaling", "scaler")),
    ("new inputs built from the existing ones (interactions, ratios, embeddings, n-grams)",
     ("interaction", "polynomial", "ratio", "feature engineering", "feature construction", "n-gram", "ngram")),
    ("the model family or its capacity (another estimator, more or fewer units or layers)",
     ("architecture", "layer", "depth", "width", "capacity", "estimator", "model family", "boosting", "forest")),
    ("the optimiser or its schedule (learning rate, warm-up, momentum, number of steps)",
     ("optimi", "learning rate", "learning_rate", "schedule", "warm", "momentum", "epoch")),
    ("regularisation (a penalty, dropout, weight decay, early stopping, shrinkage)",
     ("regulari", "dropout", "weight decay", "penalt", "early stop", "early_stop", "shrink")),
    ("averaging several models (an ensemble over seeds, folds or estimators)",
     ("ensembl", "bagging", "averag", "stacking", "voting")),
    ("which examples training sees (augmentation, resampling, removing outliers)",
     ("augment", "resampl", "outlier", "oversampl", "undersampl", "noise")),
    ("how hyper-parameters are chosen (the search space, the validation scheme)",
     ("hyper", "grid", "search", "tuning", "cross-valid", "cross_valid", "validation")),
)


def untried_angles(texts: Sequence[str]) -> list[str]:
    """The directions of ANGLES none of `texts` (earlier ideas: names, titles, summaries) takes."""
    seen = " ".join(texts).lower().replace("_", " ")
    return [angle for angle, words in ANGLES if not any(w.replace("_", " ") in seen for w in words)]
