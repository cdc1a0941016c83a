"""summarize_recall: hybrid recall, then one LLM synthesis with checked inline citations."""
