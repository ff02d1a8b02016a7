"""``--bineval-batch``: every judge request of a run through the provider's batch API, into the reply cache.

One pytest command does it all (see docs/models.md, "Batch runs"): a first pass runs the tests with the
assertions in a collecting mode (:mod:`.collect`: requests are recorded, nothing is sent or raised), the recorded
requests go to the provider as one batch per model (:mod:`.provider`, litellm's file and batch calls), the run
waits for them (:mod:`.runner`), their replies go into the reply cache, and a request that depends on an earlier
reply (the questions after a checklist's requirements, an explanation after a "no") is collected by the next first
pass; then the suite runs as a normal run, its requests answered from the cache (:mod:`.seam`). The submitted
batches are written down in the cache directory, or in Redis with a shared cache (:mod:`.registry`), so that an
interrupted run, another pytest-xdist worker or shard, or a later job resumes waiting instead of submitting again.

This package is light at import: litellm is imported when a batch is sent.
"""
