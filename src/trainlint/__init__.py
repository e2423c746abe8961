"""trainlint: static checks for the GPU-memory mistakes in PyTorch / Hugging Face training scripts."""

__version__ = "0.1.0"
