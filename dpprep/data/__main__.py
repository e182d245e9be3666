"""Command line: ``python -m dpprep.data fetch [NAMES...]`` and ``python -m dpprep.data verify``.

``fetch`` downloads every missing file of the named datasets (all when none are named) into the
cache (``$DPPREP_CACHE_DIR``, default ``~/.cache/dpprep``). ``verify`` checks the sha256 of every
registered file present (in ``--data-dir`` only, or else wherever the default search order finds
it) and prints OK / MISSING / CORRUPT per file; it exits with status 1 if any file is corrupt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpprep.data import download as dl
from dpprep.data.loaders import CIFAR100_HOWTO, load_features_npz
from dpprep.data.registry import CIFAR100_FEATURES_RELPATH, DATASETS, files_for


def _verify(data_dir: Path | None) -> int:
    corrupt = 0
    for spec in files_for(None):
        path = data_dir / spec.relpath if data_dir is not None else dl.find(spec.relpath)
        if path is None or not path.is_file():
            print(f"MISSING  {spec.relpath}")
            continue
        try:
            dl.verify_file(path, spec)
            print(f"OK       {spec.relpath}  ({path})")
        except dl.ChecksumError as err:
            corrupt += 1
            print(f"CORRUPT  {spec.relpath}  ({path}): {err}")
    features = data_dir / CIFAR100_FEATURES_RELPATH if data_dir is not None else dl.find(CIFAR100_FEATURES_RELPATH)
    if features is None or not features.is_file():
        print(f"MISSING  {CIFAR100_FEATURES_RELPATH}  (user-provided, optional)")
    else:
        try:
            load_features_npz(features)
            print(f"OK       {CIFAR100_FEATURES_RELPATH}  ({features}; format checked, no checksum)")
        except ValueError as err:
            corrupt += 1
            print(f"CORRUPT  {CIFAR100_FEATURES_RELPATH}  ({features}): {err}")
    print(f"{corrupt} corrupt file(s)" if corrupt else "no corrupt files")
    return 1 if corrupt else 0


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
    # One fetch per source so that one unreachable host does not stop the others.
    by_source: dict[tuple, list] = {}
    for spec in missing:
        by_source.setdefault((spec.urls, spec.archive), []).append(spec)
    for group in by_source.values():
        try:
            for relpath, path in dl.fetch(group, dl.cache_dir()).items():
                print(f"FETCHED  {relpath}  ({path})")
        except Exception as err:  # report every source's failure, then exit non-zero
            failed += 1
            for spec in group:
                print(f"FAILED   {spec.relpath}  from {spec.urls[0]}: {type(err).__name__}: {err}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpprep.data", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download missing dataset files into the cache")
    fetch.add_argument("names", nargs="*", help=f"datasets (default: all of {', '.join(DATASETS[:-1])})")
    fetch.add_argument("--data-dir", type=Path, default=None, help="also count files found here as present")
    verify = sub.add_parser("verify", help="check the sha256 of every dataset file present")
    verify.add_argument("--data-dir", type=Path, default=None, help="check this directory only")
    args = parser.parse_args(argv)
    if args.command == "verify":
        return _verify(args.data_dir)
    names = args.names or [n for n in DATASETS if n != "cifar100_features"]
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s) {unknown}; known: {', '.join(DATASETS)}")
    return _fetch(names, args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
