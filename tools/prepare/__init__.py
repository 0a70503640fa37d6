"""The stages ``make run`` and CI build before they start (``python3 -m prepare``)."""
