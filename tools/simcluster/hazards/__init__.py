"""Fault injectors: ``faultproxy`` (a proxy in front of the API server that stalls, drops or answers
errors) and ``hostile`` (HTTP servers a tenant could control: huge, trickling, redirecting answers)."""
