"""Fixtures for the IDE tests; the shared helpers live in ide_helpers.py and pilot_helpers.py."""

from ide_helpers import _config_dir, fake_session  # noqa: F401
