resource "google_bigquery_dataset" "analytics" {
  dataset_id                  = "analytics"
  friendly_name               = "Analytics"
  location                    = "EU"
  default_table_expiration_ms = 3600000

  access {
    role          = "OWNER"
    user_by_email = "data-team@acme.example"
  }
}

resource "google_bigquery_table" "events" {
  dataset_id          = google_bigquery_dataset.analytics.dataset_id
  table_id            = "events"
  deletion_protection = false

  time_partitioning {
    type = "DAY"
  }

  schema = <<EOT
[
  {"name": "ts", "type": "TIMESTAMP", "mode": "REQUIRED"},
  {"name": "user", "type": "STRING", "mode": "NULLABLE"}
]
EOT
}
