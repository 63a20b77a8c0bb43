terraform {
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0"
    }
  }
}

provider "google" {
  project = "acme-dev"
  region  = "us-central1"
}

locals {
  buckets = ["raw", "curated"]
}

resource "google_storage_bucket" "lake" {
  for_each = toset(local.buckets)
  name     = "acme-lake-${each.key}"
  location = "US"

  autoclass {
    enabled = true
  }

  lifecycle_rule {
    condition {
      age = 365
    }
    action {
      type = "Delete"
    }
  }
}
