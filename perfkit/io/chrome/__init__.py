"""Chrome trace-event JSON, shared by the Kineto and Ascend ``trace_view.json`` readers: the
events decoded (:mod:`.decode`, :mod:`.events`), into columns (:mod:`.columns`) and into
the canonical tables (:mod:`.tables`)."""
