"""index.json's content: the rules writers check, evaluation, editing, derived files, the catalog.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["arguments", "catalog", "derived", "editing", "handmade", "releases", "rules", "validation"]
