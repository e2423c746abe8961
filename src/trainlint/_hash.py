"""SHA-256 and SHA-1 without `import hashlib`, which loads OpenSSL (`_hashlib`: ~15 ms of a one-file run on the
project's 2-core machine). CPython's own builtin implementations give the same digests; hashlib is the fallback
where a build lacks them."""

try:
    from _sha2 import sha256  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # Python 3.10, 3.11
    except ImportError:
        from hashlib import sha256
try:
    from _sha1 import sha1
except ImportError:
    from hashlib import sha1

__all__ = ["sha1", "sha256"]
