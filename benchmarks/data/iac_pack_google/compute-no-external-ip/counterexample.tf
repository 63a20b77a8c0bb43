resource "google_compute_network" "backend" {
  name                    = "backend"
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "backend" {
  name          = "backend-europe-west1"
  region        = "europe-west1"
  network       = google_compute_network.backend.id
  ip_cidr_range = "10.10.0.0/24"
}

resource "google_compute_instance" "worker" {
  name         = "worker-1"
  machine_type = "e2-small"
  zone         = "europe-west1-b"

  boot_disk {
    initialize_params {
      image = "debian-cloud/debian-12"
    }
  }

  network_interface {
    subnetwork = google_compute_subnetwork.backend.id

    access_config {}
  }
}
