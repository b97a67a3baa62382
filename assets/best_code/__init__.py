"""best_code: the best verified code of a topic after each round, with its diff and chain of ideas."""
