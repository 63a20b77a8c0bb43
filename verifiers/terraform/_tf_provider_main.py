"""Entry point of the schema provider process: `python -m verifirst.verifiers.terraform._tf_provider_main`."""
from __future__ import annotations

import argparse

from verifirst.verifiers.terraform.tf_provider import DEFAULT_AWS, serve_managed, serve_reattach


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--schema", required=True, help="`terraform providers schema -json` file")
    ap.add_argument("--provider", default=DEFAULT_AWS, help="provider address (managed mode)")
    ap.add_argument("--reattach", action="store_true", help="long-lived, print TF_REATTACH_PROVIDERS")
    ap.add_argument("--slots", type=int, default=4, help="subset slots (reattach mode)")
    args = ap.parse_args(argv)
    if args.reattach:
        serve_reattach(args.schema, slots=args.slots)
    else:
        serve_managed(args.schema, args.provider)


if __name__ == "__main__":
    main()
