"""The export tests share helpers from export_helpers.py (not fixtures, so nothing here)."""
