"""The fake Nova's host aggregates: ``/v2.1/os-aggregates`` list, show, create, update, delete and the
``add_host`` / ``remove_host`` / ``set_metadata`` actions, on the cloud's aggregates."""

from __future__ import annotations

from aiohttp import web

from simcluster.standins.openstack.api import authorize, nova_error
from simcluster.standins.openstack.cloud import JSON, Aggregate, Cloud, now


class AggregatesAPI:
    def __init__(self, cloud: Cloud) -> None:
        self.cloud = cloud

    def add_routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/v2.1/os-aggregates", self._aggregates_list)
        r.add_post("/v2.1/os-aggregates", self._aggregates_create)
        r.add_get("/v2.1/os-aggregates/{id}", self._aggregates_show)
        r.add_put("/v2.1/os-aggregates/{id}", self._aggregates_update)
        r.add_delete("/v2.1/os-aggregates/{id}", self._aggregates_delete)
        r.add_post("/v2.1/os-aggregates/{id}/action", self._aggregates_action)

    def _find_aggregate(self, raw: str) -> Aggregate:
        with self.cloud.lock:
            agg = self.cloud.aggregates.get(int(raw)) if raw.isdigit() else None
        if agg is None:
            raise nova_error(404, "Not Found", f"Aggregate {raw} could not be found.")
        return agg

    async def _aggregates_list(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        with self.cloud.lock:
            out = [aggregate_view(a, mv) for a in sorted(self.cloud.aggregates.values(), key=lambda a: a.id)]
        return web.json_response({"aggregates": out})

    async def _aggregates_show(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        return web.json_response(
            {"aggregate": aggregate_view(self._find_aggregate(request.match_info["id"]), mv)}
        )

    async def _aggregates_create(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        try:
            body = (await request.json())["aggregate"]
            name = body["name"]
        except (ValueError, KeyError, TypeError):
            raise nova_error(400, "Bad Request", "Invalid input for field/attribute aggregate.") from None
        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            raise nova_error(400, "Bad Request", "Invalid input for field/attribute name.")
        zone = body.get("availability_zone")
        with self.cloud.lock:
            if any(a.name == name for a in self.cloud.aggregates.values()):
                raise nova_error(409, "Conflict", f"Aggregate {name} already exists.")
            agg = Aggregate(id=self.cloud.next_id(), name=name, availability_zone=zone)
            if zone:
                agg.metadata["availability_zone"] = zone
            self.cloud.aggregates[agg.id] = agg
            view = aggregate_view(agg, mv)
        view.pop("hosts")  # create answers without hosts and metadata, as nova does
        view.pop("metadata")
        return web.json_response({"aggregate": view})

    async def _aggregates_update(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        body = (await request.json()).get("aggregate", {})
        with self.cloud.lock:
            if "name" in body:
                if any(a.name == body["name"] and a.id != agg.id for a in self.cloud.aggregates.values()):
                    raise nova_error(409, "Conflict", f"Aggregate {body['name']} already exists.")
                agg.name = body["name"]
            if "availability_zone" in body:
                agg.availability_zone = body["availability_zone"]
                if body["availability_zone"]:
                    agg.metadata["availability_zone"] = body["availability_zone"]
                else:
                    agg.metadata.pop("availability_zone", None)
            agg.updated_at = now()
            return web.json_response({"aggregate": aggregate_view(agg, mv)})

    async def _aggregates_delete(self, request: web.Request) -> web.Response:
        authorize(self.cloud, request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        with self.cloud.lock:
            if agg.hosts:
                raise nova_error(
                    400, "Bad Request", f"Aggregate {agg.id} was not empty: it has hosts {agg.hosts}."
                )
            del self.cloud.aggregates[agg.id]
        return web.Response(status=200)

    async def _aggregates_action(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        try:
            body = await request.json()
            ((action, args),) = body.items()
        except (ValueError, TypeError, AttributeError):
            raise nova_error(400, "Bad Request", "Invalid aggregate action.") from None
        with self.cloud.lock:
            if action == "add_host":
                host = args.get("host")
                if not any(
                    s.host == host and s.binary == "nova-compute" for s in self.cloud.services.values()
                ):
                    raise nova_error(404, "Not Found", f"Compute host {host} could not be found.")
                if host in agg.hosts:
                    raise nova_error(409, "Conflict", f"Aggregate {agg.id} already has host {host}.")
                agg.hosts.append(host)
            elif action == "remove_host":
                host = args.get("host")
                if host not in agg.hosts:
                    raise nova_error(
                        404, "Not Found", f"Cannot remove host {host} in aggregate {agg.id}: not found."
                    )
                agg.hosts.remove(host)
            elif action == "set_metadata":
                for k, v in (args.get("metadata") or {}).items():
                    if v is None:
                        agg.metadata.pop(k, None)
                    else:
                        agg.metadata[k] = str(v)
                    if k == "availability_zone":
                        agg.availability_zone = v
            else:
                raise nova_error(400, "Bad Request", f"Invalid aggregate action {action}.")
            agg.updated_at = now()
            return web.json_response({"aggregate": aggregate_view(agg, mv)})


def aggregate_view(agg: Aggregate, mv: tuple[int, int]) -> JSON:
    view: JSON = {
        "id": agg.id,
        "name": agg.name,
        "availability_zone": agg.availability_zone,
        "hosts": list(agg.hosts),
        "metadata": dict(agg.metadata),
        "created_at": agg.created_at,
        "updated_at": agg.updated_at,
        "deleted_at": None,
        "deleted": False,
    }
    if mv >= (2, 41):
        view["uuid"] = agg.uuid
    return view
