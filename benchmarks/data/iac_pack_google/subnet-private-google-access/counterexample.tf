resource "google_compute_network" "data" {
  name                    = "data-vpc"
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "data" {
  name                     = "data-europe-west1"
  region                   = "europe-west1"
  network                  = google_compute_network.data.id
  ip_cidr_range            = "10.20.0.0/20"
  private_ip_google_access = false

  log_config {
    aggregation_interval = "INTERVAL_5_SEC"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}
