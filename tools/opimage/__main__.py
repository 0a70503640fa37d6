"""``python -m opimage``: build (or reuse) the operator's image; prints its reference, archive, size
and the seconds of each step (0 where the cache answered)."""

from __future__ import annotations

import json
import time

from opimage.build import build


def main() -> None:
    t0 = time.monotonic()
    image, timings = build()
    print(
        json.dumps(
            {
                "ref": image.ref,
                "archive": str(image.archive),
                "archive_mib": round(image.archive.stat().st_size / 2**20, 1),
                "layers": image.layers,
                "seconds": {
                    "base": round(timings.base, 1),
                    "build": round(timings.build, 1),
                    "export": round(timings.export, 1),
                    "total": round(time.monotonic() - t0, 1),
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
