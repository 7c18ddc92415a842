"""The answer stage: extractive and LLM answers, the support model and its scorers, the answer cache."""
