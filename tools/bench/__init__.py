"""``make bench``: the operator at scale on the simulated cluster (see ``bench.run``).

``python -m bench run --novas N --out FILE`` measures and prints the table; ``python -m bench
compare A.json B.json`` puts two runs side by side; ``python -m bench show FILE`` prints a run again.
"""
