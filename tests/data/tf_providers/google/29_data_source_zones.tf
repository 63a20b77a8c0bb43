data "google_compute_zones" "available" {
  region = "us-west1"
}

resource "google_compute_instance" "worker" {
  count        = 2
  name         = "worker-${count.index}"
  machine_type = "n2-standard-2"
  zone         = data.google_compute_zones.available.names[0]

  boot_disk {
    initialize_params {
      image = "debian-cloud/debian-12"
      type  = "pd-balanced"
    }
  }

  network_interface {
    network = "default"
  }

  service_account {
    scopes = ["cloud-platform"]
  }
}
