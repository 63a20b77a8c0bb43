resource "kubernetes_cron_job_v1" "db_backup" {
  metadata {
    name = "db-backup"
  }

  spec {
    schedule           = "0 2 * * *"
    concurrency_policy = "Forbid"

    job_template {
      metadata {}

      spec {
        template {
          metadata {}

          spec {
            restart_policy = "OnFailure"

            container {
              name  = "backup"
              image = "ghcr.io/acme/pg-backup:1.4"
            }
          }
        }
      }
    }
  }
}
