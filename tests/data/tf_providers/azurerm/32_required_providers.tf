provider "azurerm" {
  features {}
}

terraform {
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 4.0"
    }
  }
}

resource "azurerm_resource_group" "ml" {
  name     = "rg-ml"
  location = "swedencentral"
}

resource "azurerm_storage_account" "ml" {
  name                            = "acmemlstore"
  resource_group_name             = azurerm_resource_group.ml.name
  location                        = azurerm_resource_group.ml.location
  account_tier                    = "Standard"
  account_replication_type        = "LRS"
  allow_nested_items_to_be_public = false

  network_rules {
    default_action = "Deny"
    ip_rules       = ["198.51.100.0/24"]
  }
}
