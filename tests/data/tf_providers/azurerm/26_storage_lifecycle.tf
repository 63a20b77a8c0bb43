provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "lc" {
  name     = "rg-lifecycle"
  location = "westeurope"
}

resource "azurerm_storage_account" "archive" {
  name                     = "acmearchive01"
  resource_group_name      = azurerm_resource_group.lc.name
  location                 = azurerm_resource_group.lc.location
  account_tier             = "Standard"
  account_replication_type = "ZRS"
}

resource "azurerm_storage_management_policy" "archive" {
  storage_account_id = azurerm_storage_account.archive.id

  rule {
    name    = "to-cool"
    enabled = true
    filters {
      blob_types = ["blockBlob"]
    }
    actions {
      base_blob {
        tier_to_cool_after_days_since_modification_greater_than = 30
      }
    }
  }
}
