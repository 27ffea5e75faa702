"""The ground floor: what a registry is on disk."""
