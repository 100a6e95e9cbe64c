"""How a run is shown: the terminal view, --output json/jsonl lines."""
