queue_name = "acme-jobs"
