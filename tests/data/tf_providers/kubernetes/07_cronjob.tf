resource "kubernetes_cron_job_v1" "cleanup" {
  metadata {
    name = "cleanup"
  }

  spec {
    schedule                      = "0 3 * * *"
    concurrency_policy            = "Forbid"
    successful_jobs_history_limit = 3

    job_template {
      metadata {}
      spec {
        backoff_limit = 2
        template {
          metadata {}
          spec {
            restart_policy = "OnFailure"
            container {
              name    = "cleanup"
              image   = "alpine:3.20"
              command = ["sh", "-c", "echo cleaning"]
            }
          }
        }
      }
    }
  }
}
