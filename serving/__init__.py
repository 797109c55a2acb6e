"""The search service: the I/O edge around the pure ranking pipeline (search/).

    serving.service       SearchService: the live index and fit, rebuilt in the background when
                          the store moves; embeds, ranks (search.pipeline), re-ranks (rerank/)
    serving.parts         build_search: the store, caches, metrics, embedder and re-ranker the
                          settings ask for, and the service over them (no Flask)
    serving.watcher       the revision watcher thread that notices edits in every process
    serving.answer_cache  finished answers without re-ranking, per live index
    serving.answer        an answer: its body, its timings and its encoding, built once
"""
