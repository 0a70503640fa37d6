"""Object metadata and the metav1.Condition shape shared by both kinds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from nova_operator.models._schema import CRDModel, Schema

Int32 = Annotated[int, Schema(format="int32")]
Int64 = Annotated[int, Schema(format="int64")]

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class OwnerReference(CRDModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(CRDModel):
    """The subset of metav1.ObjectMeta the operator reads; every other field is kept as-is."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None


CONDITION_MESSAGE_MAX = 32768
"""metav1.Condition's bound on ``message`` (characters); the operator truncates to it (``conditions``)."""


class Condition(CRDModel):
    """metav1.Condition, with the same schema the upstream CRDs embed."""

    type: Annotated[str, Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    """Condition type in CamelCase, for example Ready."""
    status: Literal["True", "False", "Unknown"]
    """True, False or Unknown."""
    observed_generation: Annotated[Int64, Field(ge=0)] | None = None
    """The metadata.generation the condition was set for."""
    last_transition_time: Annotated[str, Schema(format="date-time")]
    """When the status last changed."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)]
    """Machine-readable CamelCase reason of the last transition."""
    message: Annotated[str, Field(max_length=CONDITION_MESSAGE_MAX)]
    """Human-readable details of the last transition."""


Conditions = Annotated[
    list[Condition],
    Schema(x_kubernetes_list_type="map", x_kubernetes_list_map_keys=["type"], max_items=64),
]
