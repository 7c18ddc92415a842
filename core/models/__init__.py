"""Models and clients: embedders, token vectors, ONNX runtime, rerankers, the LLM client; fitted artefacts in data/."""
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"  # fitted artefacts: support model, verifier, router, prices
