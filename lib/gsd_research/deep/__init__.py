"""Deep research through Perplexity: the job store, the queue, the worker and cost accounting."""
