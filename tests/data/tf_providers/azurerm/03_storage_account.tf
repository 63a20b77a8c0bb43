provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "data" {
  name     = "rg-data"
  location = "eastus"
}

resource "azurerm_storage_account" "logs" {
  name                     = "acmelogs001"
  resource_group_name      = azurerm_resource_group.data.name
  location                 = azurerm_resource_group.data.location
  account_tier             = "Standard"
  account_replication_type = "GRS"
  min_tls_version          = "TLS1_2"

  blob_properties {
    versioning_enabled = true
    delete_retention_policy {
      days = 30
    }
  }
}

resource "azurerm_storage_container" "raw" {
  name                  = "raw"
  storage_account_id    = azurerm_storage_account.logs.id
  container_access_type = "private"
}
