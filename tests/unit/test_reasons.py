"""The reason table (nova_operator/install/reasons.py) is the code's: every condition reason the code can
set is in it, and nothing in it is a reason the code cannot set.

The code side is read from the source with ``ast``, not from a list kept by hand: a *sink* is an
argument that becomes a condition's reason (``ctx.set(type, status, REASON, message)``,
``set_condition``, ``refused``, every package function or dataclass with a parameter or field
named ``reason``, a raised exception's ``reason`` class attribute). An argument is resolved to
the string constants it can hold: a literal, a module constant (also through an import), both
arms of a conditional; a parameter of the enclosing function makes that function a sink in turn
(forwarding), an attribute makes the dataclass field of that name a sink, a loop variable is read
from the list the loop walks, a starred ``(reason, message)`` pair from the helper's returns.
An argument none of that resolves fails the test, so a new way of passing a reason is looked at
rather than silently missed.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from nova_operator import conditions
from nova_operator.install import reasons

ROOT = pathlib.Path(__file__).resolve().parents[2] / "nova_operator"
SKIPPED = (
    "nova_operator.models",
    "nova_operator.install",
    "nova_operator.runtime.events",
)
"""Not scanned: the models' ``reason`` is a CEL rule's API-server reason (FieldValueRequired...),
install/ renders manifests, events.py records Event reasons, and the table itself."""
NOT_CONDITIONS = frozenset({"emit", "Event", "_restarted", "disable_service", "KubeError", "UpgradeBlocked"})
"""Functions and classes with a ``reason`` that is not a condition's: Event reasons (the recorder
and the upgrade's Event), the informer's watch-restart metric label, Nova's ``disabled_reason``,
an API error's reason, the upgrade step's exception (its reason only goes into the error text;
the condition comes from ``Decision.condition``)."""
PARSED = {("nova_operator.reconcilers.nova.compute_config", "reason")}
"""Sink arguments parsed out of a string (``"Reason:message"``): their reasons are the literal
prefixes, checked by ``test_parsed_reasons_are_in_the_table``."""


@dataclass
class Module:
    name: str
    tree: ast.Module
    consts: dict[str, str] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)


def _modules() -> dict[str, Module]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        mod = Module(name, tree)
        for node in tree.body:
            target, value = None, None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                mod.consts[target.id] = value.value
            elif isinstance(target, ast.Name) and isinstance(value, (ast.Name, ast.Attribute)):
                mod.aliases[target.id] = value  # ``CONDITION: Final = conditions.SECRETS_READY``
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = (alias.name, None)
        out[name] = mod
    return out


MODULES = _modules()
SCANNED = {n: m for n, m in MODULES.items() if not n.startswith(SKIPPED)}


def _with_parents(tree: ast.AST) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    stack: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    while stack:
        node, parents = stack.pop()
        yield node, parents
        stack.extend((child, [*parents, node]) for child in ast.iter_child_nodes(node))


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def _fields(cls: ast.ClassDef) -> list[str]:
    return [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


NODES = {name: list(_with_parents(mod.tree)) for name, mod in SCANNED.items()}
DATACLASSES = {
    n.name: _fields(n)
    for nodes in NODES.values()
    for n, _ in nodes
    if isinstance(n, ast.ClassDef) and _is_dataclass(n) and n.name not in NOT_CONDITIONS
}
RAISED = {
    ast.unparse(n.exc) for nodes in NODES.values() for n, _ in nodes if isinstance(n, ast.Raise) and n.exc
}


def _initial_sinks() -> dict[str, set[tuple[int, str]]]:
    """callable name -> (position among the positional arguments, self excluded; keyword) of its reasons."""
    sinks = {"set_condition": {(3, "reason")}, "refused": {(1, "reason")}}  # ``set``: ctx.set / p.set
    for nodes in NODES.values():
        for node, parents in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "reason" in _params(node):
                owner = parents[-1] if parents else None
                name = (
                    owner.name if node.name == "__init__" and isinstance(owner, ast.ClassDef) else node.name
                )
                if name not in NOT_CONDITIONS:
                    sinks.setdefault(name, set()).add((_params(node).index("reason"), "reason"))
    for name, fields in DATACLASSES.items():
        if "reason" in fields:
            sinks.setdefault(name, set()).add((fields.index("reason"), "reason"))
    return sinks


def _const(mod: Module, expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id in mod.consts:
            return mod.consts[expr.id]
        source, name = mod.imports.get(expr.id, ("", None))
        if name is not None and source in MODULES:
            return MODULES[source].consts.get(name)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        source, name = mod.imports.get(expr.value.id, ("", None))
        full = source if name is None else f"{source}.{name}"
        if full in MODULES:
            return MODULES[full].consts.get(expr.attr)
    return None


for _mod in MODULES.values():  # resolve aliases of constants once every module's constants are known
    for _alias, _value in _mod.aliases.items():
        if (_resolved := _const(_mod, _value)) is not None:
            _mod.consts.setdefault(_alias, _resolved)


@dataclass
class Scan:
    found: dict[str, set[str]] = field(default_factory=dict)  # reason -> modules setting it
    unresolved: set[tuple[str, str]] = field(default_factory=set)  # (module, argument)
    pairs: set[tuple[str, str, str]] = field(default_factory=set)  # (module, condition, reason) at one call


class _Resolver:
    def __init__(self) -> None:
        self.sinks = _initial_sinks()
        self.scan = Scan()
        self.changed = True

    def add_sink(self, name: str, index: int, keyword: str) -> None:
        if name not in NOT_CONDITIONS and (index, keyword) not in self.sinks.setdefault(name, set()):
            self.sinks[name].add((index, keyword))
            self.changed = True

    def found(self, mod: Module, value: str) -> None:
        self.scan.found.setdefault(value, set()).add(mod.name)

    def resolve(self, mod: Module, expr: ast.expr, parents: list[ast.AST]) -> None:
        if (value := _const(mod, expr)) is not None:
            return self.found(mod, value)
        if isinstance(expr, ast.IfExp):
            self.resolve(mod, expr.body, parents)
            return self.resolve(mod, expr.orelse, parents)
        fn = next(
            (p for p in reversed(parents) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))), None
        )
        if isinstance(expr, ast.Name) and fn is not None:
            if expr.id in _params(fn):  # forwarded: the function's callers pass the reason
                owner = parents[parents.index(fn) - 1] if parents.index(fn) > 0 else None
                is_init = fn.name == "__init__" and isinstance(owner, ast.ClassDef)
                target = owner.name if is_init else fn.name  # type: ignore[union-attr]
                return self.add_sink(target, _params(fn).index(expr.id), expr.id)
            if self._loop_variable(mod, fn, expr, parents) or self._unpacked(mod, fn, expr, parents):
                return None
        if isinstance(expr, ast.Call) and ast.unparse(expr.func) == "str" and len(expr.args) == 1:
            return self.resolve(mod, expr.args[0], parents)
        if isinstance(expr, ast.Attribute) and self._dataclass_field(expr.attr):
            return None
        self.scan.unresolved.add((mod.name, ast.unparse(expr)))
        return None

    def _loop_variable(self, mod: Module, fn: ast.AST, name: ast.Name, parents: list[ast.AST]) -> bool:
        """``for a, reason, b in items`` over a list literal (and its appends) in the same function."""
        for loop in (p for p in parents if isinstance(p, ast.For)):
            if not isinstance(loop.target, ast.Tuple) or not isinstance(loop.iter, ast.Name):
                continue
            index = next(
                (i for i, e in enumerate(loop.target.elts) if getattr(e, "id", None) == name.id), None
            )
            if index is None:
                continue
            rows: list[ast.expr] = []
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == loop.iter.id:
                    rows += getattr(node.value, "elts", [])
                if isinstance(node, ast.Call) and ast.unparse(node.func) == f"{loop.iter.id}.append":
                    rows += node.args
            for row in rows:
                assert isinstance(row, ast.Tuple), ast.unparse(row)
                self.resolve(mod, row.elts[index], parents)
            return bool(rows)
        return False

    def _unpacked(self, mod: Module, fn: ast.AST, name: ast.Name, parents: list[ast.AST]) -> bool:
        """``a, reason, b = TABLE[key]`` where ``TABLE`` is a module-level dict or list of tuples."""
        hit = False
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)):
                continue
            names = [getattr(e, "id", None) for e in node.targets[0].elts]
            if name.id not in names or not isinstance(node.value, ast.Subscript):
                continue
            table = next(
                (
                    s.value
                    for s in mod.tree.body
                    if isinstance(s, (ast.Assign, ast.AnnAssign))
                    and ast.unparse(s.targets[0] if isinstance(s, ast.Assign) else s.target)
                    == ast.unparse(node.value.value)
                ),
                None,
            )
            rows = table.values if isinstance(table, ast.Dict) else getattr(table, "elts", [])
            for row in rows:
                assert isinstance(row, ast.Tuple), ast.unparse(row)
                self.resolve(mod, row.elts[names.index(name.id)], parents)
                hit = True
        return hit

    def _dataclass_field(self, attr: str) -> bool:
        owners = [name for name, fields in DATACLASSES.items() if attr in fields]
        for name in owners:
            self.add_sink(name, DATACLASSES[name].index(attr), attr)
        return bool(owners)

    def _starred(self, mod: Module, star: ast.Starred, offset: int, parents: list[ast.AST]) -> None:
        """``wait(ctx, *pair)`` where ``pair`` came from a helper returning ``(reason, message)``."""
        fn = next(p for p in reversed(parents) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)))
        helper = None
        for node in ast.walk(fn):
            if isinstance(node, ast.NamedExpr) and node.target.id == getattr(star.value, "id", None):
                call = node.value.value if isinstance(node.value, ast.Await) else node.value
                helper = getattr(getattr(call, "func", None), "id", None)
        defs = [n for n in ast.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        returns = [r for d in defs if d.name == helper for r in ast.walk(d) if isinstance(r, ast.Return)]
        pairs = [r.value for r in returns if isinstance(r.value, ast.Tuple)]
        if not pairs:
            self.scan.unresolved.add((mod.name, ast.unparse(star)))
        for pair in pairs:
            self.resolve(mod, pair.elts[offset], parents)

    def run(self, rounds: int = 10) -> Scan:
        for _ in range(rounds):
            if not self.changed:
                return self.scan
            self.changed = False
            self.scan = Scan()
            for name, nodes in NODES.items():
                mod = SCANNED[name]
                for node, parents in nodes:
                    if isinstance(node, ast.ClassDef):
                        self._class_reason(mod, node, parents)
                    if isinstance(node, ast.Call):
                        self._call(mod, node, [*parents, node])
        raise AssertionError(f"the sinks do not settle: {self.sinks}")

    def _call(self, mod: Module, call: ast.Call, parents: list[ast.AST]) -> None:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name is None or name in NOT_CONDITIONS:
            return
        if name == "set":
            sinks = {(2, "reason")} if len(call.args) == 4 else set()
            self._pair(mod, call.args[0] if sinks else None, call.args[2] if sinks else None)
        elif name == "set_condition" and len(call.args) >= 4:
            sinks = self.sinks[name]
            self._pair(mod, call.args[1], call.args[3])
        else:
            sinks = self.sinks.get(name, set())
        for index, keyword_name in sorted(sinks):
            for keyword in call.keywords:
                if keyword.arg == keyword_name:
                    self.resolve(mod, keyword.value, parents)
            star = next(
                (p for p, a in enumerate(call.args) if isinstance(a, ast.Starred) and p <= index), None
            )
            if star is not None:
                self._starred(mod, call.args[star], index - star, parents)  # type: ignore[arg-type]
            elif len(call.args) > index:
                self.resolve(mod, call.args[index], parents)
        return None

    def _pair(self, mod: Module, condition: ast.expr | None, reason: ast.expr | None) -> None:
        """A call whose condition type and reason are both constants: checked as a pair."""
        cond = _const(mod, condition) if condition is not None else None
        value = _const(mod, reason) if reason is not None else None
        if cond is not None and value is not None:
            self.scan.pairs.add((mod.name, cond, value))

    def _class_reason(self, mod: Module, cls: ast.ClassDef, parents: list[ast.AST]) -> None:
        """``class SecretNotText(StepInputError): reason = "SecretNotText"``, when the class is raised."""
        raised = any(cls.name in exc for exc in RAISED)
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.Assign)
                and [ast.unparse(t) for t in stmt.targets] == ["reason"]
                and raised
            ):
                self.resolve(mod, stmt.value, [*parents, cls])


SCAN = _Resolver().run()


def _kind(module: str) -> set[str]:
    if module == "nova_operator.conditions":
        return {"Nova", "NovaCompute"}
    return {"NovaCompute"} if ".compute." in module or module.endswith(".compute") else {"Nova"}


def _table() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in reasons.REASONS:
        out.setdefault(r.reason, set()).add(r.kind)
    return out


def test_every_sink_argument_is_resolved() -> None:
    assert SCAN.unresolved <= PARSED, f"reasons the scan cannot follow: {sorted(SCAN.unresolved - PARSED)}"


def test_the_scan_follows_every_form_of_passing_a_reason() -> None:
    """One reason per form the scanner handles, so a scanner regression cannot pass unnoticed."""
    forms = {
        "WaitingForConductor": "a parameter forwarded by the workload helper",
        "ExpandFailed": "a dataclass field (_PhaseSpec.failed)",
        "WaitingForMetadataSharedSecret": "a loop over the gate list",
        "WaitingForMessagingCA": "an appended gate",
        "ClusterSecretStoreUnsupported": "a starred (reason, message) pair",
        "SecretNotText": "a raised exception's class attribute",
        "APIUnhealthy": "a module constant",
        "VPANotRequired": "a literal",
        "AllReady": "an imported module's constant",
    }
    missing = {reason: how for reason, how in forms.items() if reason not in SCAN.found}
    assert not missing
    assert "InvalidInput" not in SCAN.found  # StepInputError's default: never raised itself


def test_every_reason_the_code_sets_is_in_the_table() -> None:
    table = _table()
    missing = {
        reason: sorted(mods)
        for reason, mods in SCAN.found.items()
        if not set().union(*map(_kind, mods)) <= table.get(reason, set())
    }
    assert not missing, f"add these reasons to nova_operator/install/reasons.py: {missing}"


def _parsed() -> set[str]:
    """The constants compute_config formats as ``f"{REASON}:<message>"`` (the string it later splits)."""
    mod = MODULES["nova_operator.reconcilers.nova.compute_config"]
    return {
        str(_const(mod, head.value))
        for node in ast.walk(mod.tree)
        if isinstance(node, ast.JoinedStr) and len(node.values) > 1
        for head, colon in [(node.values[0], node.values[1])]
        if isinstance(head, ast.FormattedValue)
        and isinstance(colon, ast.Constant)
        and str(colon.value).startswith(":")
    }


def test_parsed_reasons_are_in_the_table() -> None:
    parsed = _parsed()
    assert "WaitingForRemoteTransportURL" in parsed
    assert parsed <= {r.reason for r in reasons.REASONS if r.conditions == (conditions.COMPUTE_CONFIG_READY,)}


def test_nothing_in_the_table_is_a_reason_the_code_cannot_set() -> None:
    parsed = _parsed()
    stale = sorted(r.reason for r in reasons.REASONS if r.reason not in SCAN.found and r.reason not in parsed)
    assert not stale, f"the code sets none of these: {stale}"
    for r in reasons.REASONS:
        kinds = set().union(
            *map(_kind, SCAN.found.get(r.reason, {"nova_operator.reconcilers.nova.compute_config"}))
        )
        assert r.kind in kinds, (r.reason, r.kind, kinds)


def test_each_entry_names_conditions_of_its_kind_and_says_what_to_do() -> None:
    nova = {
        *conditions.NOVA_READY_INPUTS,
        conditions.EXTRA_CONFIG_HEALTHY,
        conditions.SERVICE_RECORDS_HEALTHY,
        conditions.READY,
        reasons.ANY_NOVA_STEP,
    }
    pool = {*conditions.NOVACOMPUTE_READY_INPUTS, conditions.EXTRA_CONFIG_HEALTHY, conditions.READY}
    seen = set()
    for r in reasons.REASONS:
        allowed = nova if r.kind == "Nova" else pool
        assert r.conditions, r
        assert set(r.conditions) <= allowed, r
        assert r.meaning.strip(), r
        assert r.action.strip(), r
        for cond in r.conditions:
            assert (r.kind, cond, r.reason) not in seen, f"listed twice: {r}"
            seen.add((r.kind, cond, r.reason))


def test_the_reasons_the_docs_call_never_set_are_not_set() -> None:
    from nova_operator.install import troubleshooting

    table = {r.reason for r in reasons.REASONS}
    for reason in troubleshooting.NOT_SET:
        assert reason not in SCAN.found, reason
        assert reason not in table, reason


def test_each_condition_and_reason_set_together_is_an_entry_of_the_table() -> None:
    """Where one call names both (``ctx.set(CONDITION, False, REASON, ...)``), the table agrees."""
    assert len(SCAN.pairs) > 40
    wrong = []
    for module, cond, reason in sorted(SCAN.pairs):
        entries = [r for r in reasons.REASONS if r.reason == reason and r.kind in _kind(module)]
        if not any(cond in r.conditions or reasons.ANY_NOVA_STEP in r.conditions for r in entries):
            wrong.append((module, cond, reason))
    assert not wrong, f"the table lists these reasons under other conditions: {wrong}"
