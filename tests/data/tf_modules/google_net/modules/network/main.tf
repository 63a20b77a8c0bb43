variable "name" {
  type = string
}

variable "region" {
  type = string
}

variable "subnets" {
  type = map(string)
}

resource "google_compute_network" "this" {
  name                    = var.name
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "this" {
  for_each      = var.subnets
  name          = "${var.name}-${each.key}"
  ip_cidr_range = each.value
  region        = var.region
  network       = google_compute_network.this.id
}

output "self_link" {
  value = google_compute_network.this.self_link
}
