"""Where admitted jobs run: lanes, the queue's head, batching, claims, runs and their
records, the start journal, recovery after a crash, the watchdog and run limits."""
