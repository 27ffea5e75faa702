"""index.json's content: the rules writers check, evaluation, editing, derived files, the catalog."""
