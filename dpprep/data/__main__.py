"""Command line: ``python -m dpprep.data fetch [NAMES...]`` and ``python -m dpprep.data verify``.

``fetch`` downloads every missing file of the named datasets (all when none are named) into the
cache (``$DPPREP_CACHE_DIR``, default ``~/.cache/dpprep``). ``verify [NAMES...]`` checks the sha256
of every registered file of the named datasets (all when none are named) in ``--data-dir`` only, or
else wherever the default search order finds it, and prints OK / MISSING / CORRUPT / UNREADABLE per
file; it exits with status 1 if any file asked for is not OK. The user-provided CIFAR-100 features
are optional: checked when present, counted as missing only when ``cifar100_features`` is named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpprep.data import download as dl
from dpprep.data.loaders import CIFAR100_HOWTO, load_features_npz
from dpprep.data.registry import CIFAR100_FEATURES_RELPATH, DATASETS, files_for


def _verify(names: list[str], data_dir: Path | None) -> int:
    bad = 0
    if data_dir is not None and not data_dir.is_dir():
        bad += 1  # every file below is then missing too, but say why once
        print(f"MISSING  --data-dir {data_dir}: not a directory")

    def locate(relpath: str) -> Path | None:
        path = data_dir / relpath if data_dir is not None else dl.find(relpath)
        return path if path is not None and path.is_file() else None

    # One line per file whatever happens to the others (an unreadable directory included).
    for spec in files_for(names or None):
        try:
            path = locate(spec.relpath)
            if path is None:
                bad += 1
                print(f"MISSING  {spec.relpath}")
                continue
            dl.verify_file(path, spec)
            print(f"OK       {spec.relpath}  ({path})")
        except dl.ChecksumError as err:
            bad += 1
            print(f"CORRUPT  {spec.relpath}  ({path}): {err}")
        except OSError as err:
            bad += 1
            print(f"UNREADABLE {spec.relpath}: {type(err).__name__}: {err}")
    if not names or "cifar100_features" in names:
        required = "cifar100_features" in names  # optional unless asked for by name
        features = None
        try:
            features = locate(CIFAR100_FEATURES_RELPATH)
            if features is None:
                bad += required
                print(
                    f"MISSING  {CIFAR100_FEATURES_RELPATH}"
                    + ("" if required else "  (user-provided, optional)")
                )
            else:
                load_features_npz(features)
                print(
                    f"OK       {CIFAR100_FEATURES_RELPATH}  ({features}; format checked, no"
                    " checksum)"
                )
        except ValueError as err:
            bad += 1
            print(f"CORRUPT  {CIFAR100_FEATURES_RELPATH}  ({features}): {err}")
        except OSError as err:
            bad += 1
            print(f"UNREADABLE {CIFAR100_FEATURES_RELPATH}: {type(err).__name__}: {err}")
    print(f"{bad} file(s) missing, corrupt or unreadable" if bad else "all files OK")
    return 1 if bad else 0


def _fetch(names: list[str], data_dir: Path | None) -> int:
    failed = 0
    if "cifar100_features" in names:
        print(f"SKIP     {CIFAR100_FEATURES_RELPATH}: {CIFAR100_HOWTO}")
        failed += 1
        names = [n for n in names if n != "cifar100_features"]
    missing = []
    for spec in files_for(names):
        found = dl.find(spec.relpath, data_dir)
        if found is not None:
            print(f"PRESENT  {spec.relpath}  ({found})")
        else:
            missing.append(spec)
    # One fetch per source so that one unreachable host does not stop the others; one time budget
    # for the whole command, so that a host which stalled is not waited on again for its next file.
    by_source: dict[tuple, list] = {}
    for spec in missing:
        by_source.setdefault((spec.urls, spec.archive), []).append(spec)
    try:
        budget = dl.FetchBudget()
    except ValueError as err:  # a malformed $DPPREP_DOWNLOAD_DEADLINE
        print(f"error: {err}")
        return 1
    for group in by_source.values():
        try:
            for relpath, path in dl.fetch(group, dl.cache_dir(), budget=budget).items():
                print(f"FETCHED  {relpath}  ({path})")
        except Exception as err:  # report every source's failure, then exit non-zero
            failed += 1
            for spec in group:
                print(f"FAILED   {spec.relpath}  from {spec.urls[0]}: {type(err).__name__}: {err}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dpprep.data", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download missing dataset files into the cache")
    fetch.add_argument(
        "names", nargs="*", help=f"datasets (default: all of {', '.join(DATASETS[:-1])})"
    )
    fetch.add_argument(
        "--data-dir", type=Path, default=None, help="also count files found here as present"
    )
    verify = sub.add_parser(
        "verify", help="check the sha256 of every dataset file; non-zero if any is not OK"
    )
    verify.add_argument("names", nargs="*", help="datasets (default: all)")
    verify.add_argument("--data-dir", type=Path, default=None, help="check this directory only")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s) {unknown}; known: {', '.join(DATASETS)}")
    if args.command == "verify":
        return _verify(args.names, args.data_dir)
    return _fetch(args.names or [n for n in DATASETS if n != "cifar100_features"], args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
