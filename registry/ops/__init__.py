"""The logic of every command, one module per command, named after it.

``registry add-base`` is :mod:`.add_base`, ``registry verify-remote`` is :mod:`.verify_remote`,
and so on.  Each plans its changes, checks them, then applies them in one transaction.  The
feature packages (hashing, artifacts, convert, card, gate, hub) are libraries these modules call;
:mod:`registry.cli` only parses options and prints.  A command imports those libraries, not another
command; the few that compose commands (demo, pull, publish, ...) are named in tests/test_floors.py.
"""
