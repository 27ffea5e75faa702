"""The ground floor: what a registry is on disk (its names, models and errors, the folder and its
transactions, hashing, SHA256SUMS, the tree walk), below every other package.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = [
    "adoptable",
    "atomic",
    "author_evaluation",
    "collisions",
    "create",
    "errors",
    "evaluation",
    "files",
    "gitattributes",
    "gitfiles",
    "hashing",
    "layout",
    "lfs",
    "libc",
    "models",
    "names",
    "pinned",
    "progress",
    "published",
    "repo",
    "resources",
    "safepath",
    "schemas",
    "sigbus",
    "staged_sums",
    "sums",
    "train",
    "tree",
    "userkey",
    "validation_result",
    "verdict",
]
