"""Commands' logic: each function plans its changes, checks them, then applies them in one transaction."""
