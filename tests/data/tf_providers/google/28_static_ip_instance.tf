variable "zone" {
  type    = string
  default = "europe-west4-a"
}

resource "google_compute_address" "static" {
  name   = "bastion-ip"
  region = "europe-west4"
}

resource "google_compute_instance" "bastion" {
  name         = "bastion"
  machine_type = "e2-micro"
  zone         = var.zone

  boot_disk {
    initialize_params {
      image = "ubuntu-os-cloud/ubuntu-2204-lts"
    }
  }

  network_interface {
    network = "default"
    access_config {
      nat_ip = google_compute_address.static.address
    }
  }

  shielded_instance_config {
    enable_secure_boot = true
  }
}

output "bastion_ip" {
  value = google_compute_address.static.address
}
