resource "google_compute_network" "app" {
  name = "app-vpc"
}

resource "google_sql_database_instance" "orders" {
  name                = "orders-db"
  region              = "europe-west1"
  database_version    = "POSTGRES_15"
  deletion_protection = true

  settings {
    tier = "db-custom-2-7680"

    ip_configuration {
      ipv4_enabled    = false
      private_network = google_compute_network.app.id
    }

    backup_configuration {
      enabled = true
    }
  }
}
