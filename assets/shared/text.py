"""Text helpers more than one stage uses."""

# words that do not tell two idea titles apart ("Tuning the Regularization Parameter" is
# "Regularization Parameter Tuning")
_TITLE_FILLER = frozenset("a an the of for to and with in on by via using use based from into as its at".split())


def title_key(title: str) -> frozenset[str]:
    """The words of an idea title that say what it is: lower case, no filler words, a trailing
    plural `s` dropped. Two titles with the same key name the same idea."""
    words = "".join(c if c.isalnum() else " " for c in title.lower()).split()
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                     for w in words if w not in _TITLE_FILLER)
