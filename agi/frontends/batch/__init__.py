"""`agi --batch`: many prompts in one process (docs: batch): `main` the front end and its
signals, `flags` its options, `jobs` reading, shards and resume, `runner` the job runner and its
backends, `shared` the output, the budget, the shared backoff and clients, the progress line."""
