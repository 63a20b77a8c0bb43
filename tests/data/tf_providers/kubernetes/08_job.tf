resource "kubernetes_job_v1" "migrate" {
  metadata {
    name = "db-migrate"
  }

  spec {
    backoff_limit = 4
    template {
      metadata {}
      spec {
        restart_policy = "Never"
        container {
          name    = "migrate"
          image   = "ghcr.io/acme/migrations:41"
          command = ["/app/migrate", "up"]
        }
      }
    }
  }

  wait_for_completion = false
}
