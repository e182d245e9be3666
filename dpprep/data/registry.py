"""Every data file dpprep knows: where it lives under a data directory, its sha256 and its source.

The table is embedded here (copied from the offline copy's SHA256SUMS and its README) so that the
package never depends on a particular local copy existing. For gzip'd IDX files the checksum is of
the DECOMPRESSED content: a re-compressed copy has a different gzip header but the same content.
"""

from __future__ import annotations

import dataclasses

_MNIST_MIRRORS = (
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
)
_FASHION_MIRROR = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_ADULT_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
_SEPSIS_ZIP = (
    "https://archive.ics.uci.edu/static/public/827/sepsis+survival+minimal+clinical+records.zip"
)
_CREDIT_ZIP = "https://archive.ics.uci.edu/static/public/350/default+of+credit+card+clients.zip"
_INSURANCE_URL = (
    "https://raw.githubusercontent.com/stedy/Machine-Learning-with-R-datasets/master/insurance.csv"
)


@dataclasses.dataclass(frozen=True)
class FileSpec:
    """One data file.

    ``relpath`` is relative to a data directory (``<dataset>/<file>``). ``sha256`` is of the file's
    bytes, or of its decompressed bytes when ``gzip_content`` is true. ``urls`` are tried in order.
    ``archive`` says how to get the file out of what the URL serves: ``None`` (the file itself),
    ``"zip"`` (the zip member whose basename is ``member``) or ``"zip_xls_csv"`` (the .xls member
    ``member`` of a zip, converted to CSV; needs the optional ``xlrd`` package).
    """

    relpath: str
    sha256: str
    urls: tuple[str, ...]
    gzip_content: bool = False
    archive: str | None = None
    member: str | None = None

    @property
    def dataset(self) -> str:
        return self.relpath.split("/", 1)[0]


def _idx(folder: str, name: str, content_sha: str, mirrors: tuple[str, ...]) -> FileSpec:
    urls = tuple(mirror + name + ".gz" for mirror in mirrors)
    return FileSpec(f"{folder}/{name}.gz", content_sha, urls, gzip_content=True)


def _adult(suffix: str, sha: str) -> FileSpec:
    return FileSpec(f"adult/adult.{suffix}", sha, (f"{_ADULT_URL}adult.{suffix}",))


def _sepsis(cohort: str, sha: str) -> FileSpec:
    name = f"s41598-020-73558-3_sepsis_survival_{cohort}_cohort.csv"
    return FileSpec(f"sepsis/{name}", sha, (_SEPSIS_ZIP,), archive="zip", member=name)


# sha256 of the decompressed IDX content (data README); the .gz bytes differ between mirrors.
_IDX_CONTENT_SHA256 = {
    "mnist/train-images-idx3-ubyte": (
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"
    ),
    "mnist/train-labels-idx1-ubyte": (
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"
    ),
    "mnist/t10k-images-idx3-ubyte": (
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"
    ),
    "mnist/t10k-labels-idx1-ubyte": (
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"
    ),
    "fashion_mnist/train-images-idx3-ubyte": (
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
    ),
    "fashion_mnist/train-labels-idx1-ubyte": (
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"
    ),
    "fashion_mnist/t10k-images-idx3-ubyte": (
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
    ),
    "fashion_mnist/t10k-labels-idx1-ubyte": (
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"
    ),
}
_IDX_STEMS = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)

FILES: tuple[FileSpec, ...] = (
    *(
        _idx("mnist", stem, _IDX_CONTENT_SHA256[f"mnist/{stem}"], _MNIST_MIRRORS)
        for stem in _IDX_STEMS
    ),
    *(
        _idx(
            "fashion_mnist", stem, _IDX_CONTENT_SHA256[f"fashion_mnist/{stem}"], (_FASHION_MIRROR,)
        )
        for stem in _IDX_STEMS
    ),
    _adult("data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"),
    _adult("test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"),
    _adult("names", "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a"),
    _sepsis("primary", "6ba4ebd256fa3b5f6c0d42444a3e6b9a4b90d6e493c9efdfedcb2ef7470d4b0f"),
    _sepsis("study", "d3302756c0e16d78acf8f1ed7d9692afeafe02d5b224b5aa694598e1b7443001"),
    _sepsis("validation", "37a21fbbc2626131d318391af2e91c454316e18b11043175171b4b8d8a04a7a7"),
    FileSpec(
        "credit_default/default_of_credit_card_clients.csv",
        "023eb2c3ad9efd15e7869616fa50a0143f25223105c7069ba632431530afdb61",
        (_CREDIT_ZIP,),
        archive="zip_xls_csv",
        member="default of credit card clients.xls",
    ),
    FileSpec(
        "insurance/insurance.csv",
        "505c1cbc2e63d0363bac59501563df2530aadf4cdb9cfee226f4ef32f5468281",
        (_INSURANCE_URL,),
    ),
)

FILES_BY_PATH: dict[str, FileSpec] = {spec.relpath: spec for spec in FILES}

# Files each loader reads (a dataset may own more files, e.g. the other sepsis cohorts).
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "mnist": tuple(f"mnist/{stem}.gz" for stem in _IDX_STEMS),
    "fashion_mnist": tuple(f"fashion_mnist/{stem}.gz" for stem in _IDX_STEMS),
    "adult": ("adult/adult.data", "adult/adult.test"),
    "sepsis": ("sepsis/s41598-020-73558-3_sepsis_survival_primary_cohort.csv",),
    "credit_default": ("credit_default/default_of_credit_card_clients.csv",),
    "insurance": ("insurance/insurance.csv",),
}

# User-provided features: no URL, no checksum (see dpprep.data docstring for the format).
CIFAR100_FEATURES_RELPATH = "cifar100_features/features.npz"

DATASETS: tuple[str, ...] = (*DATASET_FILES, "cifar100_features")


def files_for(names: list[str] | tuple[str, ...] | None = None) -> tuple[FileSpec, ...]:
    """Every registered file of the given datasets (all when ``names`` is None), in table order."""
    if names is None:
        return FILES
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {unknown}; known: {', '.join(DATASETS)}")
    return tuple(spec for spec in FILES if spec.dataset in names)
